# /etc/profile.d/boxwire.sh (from image/profile.sh): Debian's /etc/profile
# resets PATH for login shells, so put back what the sandbox user installs
# into HOME — pip's user scripts and npm's global bin (NPM_CONFIG_PREFIX) —
# in front. HOME is on the workspace volume (/workspace/.home).
case ":$PATH:" in
  *":$HOME/.local/bin:"*) ;;
  *) PATH="$HOME/.local/bin:$PATH" ;;
esac
export PATH
