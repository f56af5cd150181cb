// Package benchcmp is the machine-readable form of a `make bench` run and
// the comparison of two sets of runs that `make bench-compare` prints.
//
// A run (Run) is one JSON file: when and where it ran (the git commit, the
// image, the machine's CPUs and load average), then each figure with its
// unit, its value, which direction is better, and, where the figure has
// rounds, every round's sample. Compare reads the runs of the old and the
// new side and says for each figure how far it moved and whether that is
// beyond the spread of the samples (their interquartile range), so that a
// regression stands out in review and the noise of a loaded machine does
// not pass for one.
package benchcmp
