package sandbox

// Labels the bridge puts on every sandbox and workspace volume it creates,
// so that it can adopt, reap and collect them by label alone.
const (
	// LabelOwner is the id of the bridge that owns the sandbox.
	LabelOwner = "boxwire.owner"
	// LabelThread is the thread of a thread-scoped sandbox.
	LabelThread = "boxwire.thread"
	// LabelAssistant is the assistant of an assistant-scoped sandbox.
	LabelAssistant = "boxwire.assistant"
	// LabelScope is "thread" or "assistant".
	LabelScope = "boxwire.scope"
	// LabelCreated is the creation time, RFC 3339 in UTC.
	LabelCreated = "boxwire.created"
	// LabelExpires is the end of the sandbox's maximum lifetime, RFC 3339
	// in UTC.
	LabelExpires = "boxwire.expires"
	// LabelBox is the bridge's id for the sandbox: its socket folder is
	// <data dir>/run/<box>, its container boxwire-<box> and its workspace
	// volume boxwire-ws-<box>.
	LabelBox = "boxwire.box"
)
