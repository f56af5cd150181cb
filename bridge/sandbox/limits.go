package sandbox

// WithDefaults fills l's zero fields from def, then from the package
// defaults (DefaultPidsLimit and friends): the rule every Manager applies
// to a Spec's limits.
func (l Limits) WithDefaults(def Limits) Limits { return l.withDefaults(def) }
