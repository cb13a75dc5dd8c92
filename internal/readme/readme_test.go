package readme_test

import (
	"bytes"
	"context"
	"fmt"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// imports are the packages a README fragment may use, by the name it uses
// them under; a fragment gets the imports of the names it uses.
var imports = map[string]string{
	"context":   `"context"`,
	"errors":    `"errors"`,
	"fmt":       `"fmt"`,
	"log":       `"log"`,
	"os":        `"os"`,
	"time":      `"time"`,
	"slog":      `"log/slog"`,
	"sql":       `"database/sql"`,
	"locker":    `"github.com/distlock/locker"`,
	"fencing":   `"github.com/distlock/locker/fencing"`,
	"memory":    `"github.com/distlock/locker/memory"`,
	"redis":     `"github.com/distlock/locker/redis"`,
	"etcd":      `"github.com/distlock/locker/etcd"`,
	"zookeeper": `"github.com/distlock/locker/zookeeper"`,
	"postgres":  `"github.com/distlock/locker/postgres"`,
	"sqlguard":  `"github.com/distlock/locker/fencing/sqlguard"`,
	"goredis":   `goredis "github.com/redis/go-redis/v9"`,
	"clientv3":  `clientv3 "go.etcd.io/etcd/client/v3"`,
	"zk":        `"github.com/go-zookeeper/zk"`,
	"pgx":       `"github.com/jackc/pgx/v5"`,
	"pgxpool":   `"github.com/jackc/pgx/v5/pgxpool"`,
}

type block struct {
	lang, text string
	line       int
}

var fence = regexp.MustCompile("(?m)^```([a-z]*)\n")

// blocks returns README's fenced blocks in order.
func blocks(t *testing.T, readme string) []block {
	var out []block
	for rest, offset := readme, 0; ; {
		m := fence.FindStringSubmatchIndex(rest)
		if m == nil {
			return out
		}
		body := rest[m[1]:]
		end := strings.Index(body, "\n```")
		if end < 0 {
			t.Fatalf("README.md: unterminated block at line %d", strings.Count(readme[:offset+m[0]], "\n")+1)
		}
		out = append(out, block{lang: rest[m[2]:m[3]], text: body[:end+1],
			line: strings.Count(readme[:offset+m[0]], "\n") + 1})
		next := m[1] + end + 4
		rest, offset = rest[next:], offset+next
	}
}

// usedPackages lists the package names a fragment refers to (name.Sel),
// outside strings and comments.
func usedPackages(src string) []string {
	var s scanner.Scanner
	fset := token.NewFileSet()
	s.Init(fset.AddFile("", -1, len(src)), []byte(src), nil, 0)
	var used []string
	prev, prevLit := token.ILLEGAL, ""
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.PERIOD && prev == token.IDENT && imports[prevLit] != "" && !slices.Contains(used, prevLit) {
			used = append(used, prevLit)
		}
		prev, prevLit = tok, lit
	}
	return used
}

// program turns a README Go block into a file of package main: a whole file
// as it is, a fragment as the body of a function that has a ctx and a
// Locker l in scope, as the README's prose says.
func program(src string) string {
	if strings.HasPrefix(strings.TrimSpace(src), "package ") {
		return src
	}
	var b strings.Builder
	b.WriteString("package main\n\nimport (\n")
	used := usedPackages(src)
	for _, p := range []string{"context", "locker"} {
		if !slices.Contains(used, p) {
			used = append(used, p)
		}
	}
	for _, p := range used {
		fmt.Fprintf(&b, "\t%s\n", imports[p])
	}
	// The fragment goes in a block of its own (it may declare its own ctx)
	// under a condition, so that a fragment ending in return does not make
	// the final return unreachable.
	b.WriteString(")\n\nfunc main() {}\n\nfunc snippet(ctx context.Context, l locker.Locker) error {\n\tif ctx != nil {\n")
	b.WriteString(src)
	b.WriteString("\t}\n\treturn nil\n}\n")
	return b.String()
}

func TestREADME_GoSnippetsCompileAndRun(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	all := blocks(t, string(readme))
	// The snippets are built inside the module, so that they use this
	// checkout of locker and its go.sum.
	dir, err := os.MkdirTemp(".", "snippets-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	type built struct {
		block
		dir    string
		output *block // the output block shown right after a whole program
	}
	var progs []built
	for i, b := range all {
		if b.lang != "go" {
			continue
		}
		sub := filepath.Join(dir, fmt.Sprintf("line%04d", b.line))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		src := program(b.text)
		if err := os.WriteFile(filepath.Join(sub, "main.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		p := built{block: b, dir: sub}
		if src == b.text && i+1 < len(all) && all[i+1].lang == "text" && strings.HasPrefix(all[i+1].text, "$ go run") {
			p.output = &all[i+1]
		}
		progs = append(progs, p)
	}
	if len(progs) == 0 {
		t.Fatal("README.md has no Go snippet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// One vet of all snippets: it compiles them, and catches what a
	// compiler lets through (a Printf verb that does not fit, say).
	vet := exec.CommandContext(ctx, "go", "vet", "./"+dir+"/...")
	if out, err := vet.CombinedOutput(); err != nil {
		t.Fatalf("README.md Go snippets do not compile or vet (dirs are named by README line):\n%s", out)
	}
	for _, p := range progs {
		if p.output == nil {
			continue
		}
		// The shown output starts with the command line; the rest is what
		// the program must print.
		cmdLine, want, _ := strings.Cut(p.output.text, "\n")
		args := strings.Fields(strings.TrimPrefix(cmdLine, "$ go run ."))
		bin := filepath.Join(p.dir, "prog")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./"+p.dir).CombinedOutput(); err != nil {
			t.Fatalf("README.md line %d: build: %v\n%s", p.line, err, out)
		}
		var stdout, stderr bytes.Buffer
		run := exec.CommandContext(ctx, bin, args...)
		run.Stdout, run.Stderr = &stdout, &stderr
		if err := run.Run(); err != nil {
			t.Fatalf("README.md line %d: the program failed: %v\n%s", p.line, err, stderr.String())
		}
		if got := stdout.String(); got != want {
			t.Errorf("README.md line %d: the program printed\n%s\nthe README shows (line %d)\n%s", p.line, got, p.output.line, want)
		}
	}
}
