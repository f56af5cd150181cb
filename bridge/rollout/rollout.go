// Package rollout is the HTTP side of rollouts (docs/lifecycle.md
// "Rollouts"): the admin routes that show and pause the move of live
// sandboxes to a rebuilt image, and reloading the image allowlist (the
// bridge does it on SIGHUP). The pace and the moves themselves are
// bridge/fleet's (rollout.go); moving one thread to another image is the
// threads API's (PATCH /v1/threads/{id} "image", bridge/server).
//
// The server makes an [API] over its fleet and mounts it with
// [API.Routes] behind its admins-only check, and [API.ImagesRoute] (the
// allowed image names, GET /v1/images) for anyone authenticated; its Run calls
// [API.ReloadImages] on every reload signal. It never imports the server.
package rollout

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/internal/httpjson"
	"github.com/boxwire/boxwire/bridge/wire"
)

// maxBody bounds a POST /v1/rollout body.
const maxBody = 4 << 10

// Images is what the API needs of the fleet's images (*fleet.Images has
// it).
type Images interface {
	// Rollout describes the rollout now.
	Rollout() fleet.RolloutStatus
	// Pause holds live sandboxes on their build, or lets them go on.
	Pause(paused bool)
	// Set replaces the images a thread may ask for besides the default
	// one.
	Set(images []string)
	// List returns the images a thread may ask for, the default first.
	List() []string
}

// API serves the rollout routes over the fleet's Images. Its zero value
// is not usable: Images and Log are required.
type API struct {
	Images Images
	Log    *slog.Logger
	// Image is the default image, named in the reload's log line.
	Image string
	// Reload returns the images a thread may use besides the default
	// (Config.ReloadImages of the server); nil: nothing to reload.
	Reload func() ([]string, error)
}

// Routes mounts GET and POST /v1/rollout on mux, each behind admin (the
// caller's admins-only check) and POST also behind audited, which records
// the named action.
func (a API) Routes(mux *http.ServeMux, admin func(http.Handler) http.Handler, audited func(action string, next http.Handler) http.Handler) {
	mux.Handle("GET /v1/rollout", admin(http.HandlerFunc(a.get)))
	mux.Handle("POST /v1/rollout", admin(audited("rollout.update", http.HandlerFunc(a.post))))
}

// ImagesRoute mounts GET /v1/images on mux behind auth (the caller's
// check that a request is authenticated, admin or not): the images a
// thread may ask for (wire.ImageList), so a client can offer a choice.
// It names the images only; what runs where is GET /v1/rollout's, for
// admins.
func (a API) ImagesRoute(mux *http.ServeMux, auth func(http.Handler) http.Handler) {
	mux.Handle("GET /v1/images", auth(http.HandlerFunc(a.images)))
}

// images answers GET /v1/images.
func (a API) images(w http.ResponseWriter, _ *http.Request) {
	list := wire.ImageList{Images: a.Images.List()}
	if list.Images == nil {
		list.Images = []string{}
	}
	if len(list.Images) > 0 {
		list.Default = list.Images[0]
	}
	httpjson.Write(w, http.StatusOK, list)
}

// get answers GET /v1/rollout: fleet.RolloutStatus, the images in use,
// how many sandboxes and threads run each and how many are behind.
func (a API) get(w http.ResponseWriter, _ *http.Request) {
	httpjson.Write(w, http.StatusOK, a.Images.Rollout())
}

// post answers POST /v1/rollout {"paused": true|false}: pauses or resumes
// the rollout, and answers with its status. A body without paused is 400.
func (a API) post(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Paused *bool `json:"paused"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err == nil && req.Paused == nil {
		err = errors.New("paused is required")
	}
	if err != nil {
		httpjson.Error(w, http.StatusBadRequest, wire.CodeBadMessage, "body: "+err.Error())
		return
	}
	a.Images.Pause(*req.Paused)
	httpjson.Write(w, http.StatusOK, a.Images.Rollout())
}

// ReloadImages asks Reload for the images a thread may use besides the
// default and gives them to the fleet; an error keeps the ones it had,
// and says so in the log.
func (a API) ReloadImages() {
	if a.Reload == nil {
		a.Log.Info("reload: nothing to reload")
		return
	}
	images, err := a.Reload()
	if err != nil {
		a.Log.Error("reload the image allowlist; keeping the old one", "err", err)
		return
	}
	a.Images.Set(images)
	a.Log.Info("image allowlist reloaded", "image", a.Image, "images", images)
}
