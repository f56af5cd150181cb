package render

// Clip is clip, for the black-box tests.
var Clip = clip
