package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FileConfig is the client's config file (JSON), by default
// $XDG_CONFIG_HOME/boxwire/client.json (~/.config/boxwire/client.json).
// Flags win over the environment, which wins over the file.
type FileConfig struct {
	// URL is the bridge or agent, like --url.
	URL string `json:"url,omitempty"`
	// Token is the bearer token, like --token. Keep the file private.
	Token string `json:"token,omitempty"`
}

// DefaultConfigPath is where LoadConfig looks when no path is given; empty
// when the user's config folder is unknown.
func DefaultConfigPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "boxwire", "client.json")
}

// LoadConfig reads the config file at path. A missing file is an empty
// config unless required (an explicitly named file must exist).
func LoadConfig(path string, required bool) (FileConfig, error) {
	var fc FileConfig
	if path == "" {
		return fc, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !required {
		return fc, nil
	}
	if err != nil {
		return fc, fmt.Errorf("config: %w", err)
	}
	if err := json.Unmarshal(data, &fc); err != nil {
		return fc, fmt.Errorf("config %s: %w", path, err)
	}
	return fc, nil
}

// DefaultHistoryPath is where the line editor keeps its history, beside
// the default config file; empty when the user's config folder is unknown.
func DefaultHistoryPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "boxwire", "history")
}
