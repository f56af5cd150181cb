// Package chattest is a fake boxwire server for tests of code that uses
// package chat: an httptest server that checks the bearer token, upgrades
// /v1/ws and hands each connection to a handler as a Peer that speaks
// bridge/wire. Scripted builds a handler that plays canned turns.
package chattest
