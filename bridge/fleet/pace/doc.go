// Package pace is the pace of a rollout: which of a fleet's live
// sandboxes move to a new build of their image (a rebuild under the same
// tag) or to the image they were moved to, and when. A [Rollout] keeps
// what each image reference named at the last look ([Rollout.Learn]),
// whether the rollout is paused, and when the last batch started; given
// the idle sandboxes on a reaper tick, [Rollout.Due] picks those to
// replace now — every moved one, and the ones on an old build all at once
// or [Config.Batch] per [Config.Interval], oldest first.
//
// A Rollout does not lock: the fleet (bridge/fleet) holds its own lock
// around every call, so its books and the rollout's change together.
package pace
