//go:build !unix

package servers

// processExists cannot tell elsewhere: leftovers are kept.
func processExists(int) bool { return true }
