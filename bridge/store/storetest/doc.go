// Package storetest is the black-box test suite every store.Backend
// passes: the bbolt store (bridge/store) always, the PostgreSQL one
// (bridge/store/pgstore) when a server is at hand. A test calls Run with a
// Config that makes an empty place and opens stores there.
//
// It imports testing; only _test files import it.
package storetest
