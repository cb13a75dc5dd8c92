// Package readme holds the test that keeps README.md true: every Go snippet
// in it is compiled, and every whole program in it is run and its output
// compared with the output the README shows after it.
package readme
