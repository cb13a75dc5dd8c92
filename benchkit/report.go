package benchkit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Report is everything a run writes to its --out directory.
type Report struct {
	Title    string    `json:"title"`
	Command  string    `json:"command"` // the command line that produced it
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Machine  Machine   `json:"machine"`
	// Servers maps a server to its version and address, as the run found them.
	Servers []Server `json:"servers,omitempty"`
	Config  *Config  `json:"config"`
	// Notes are paragraphs printed under the title (method, caveats).
	Notes   []string  `json:"notes,omitempty"`
	Results []*Result `json:"results"`
	Targets []Check   `json:"targets,omitempty"`
	// PerGroupCharts draws one set of charts per group (the peer
	// comparison) rather than one for all subjects (backend vs backend).
	PerGroupCharts bool    `json:"-"`
	Charts         []Chart `json:"charts,omitempty"`
}

// Server is one server the run used.
type Server struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Address string `json:"address"`
}

// Machine describes where the run happened.
type Machine struct {
	CPU       string `json:"cpu"`
	NumCPU    int    `json:"nproc"`
	Memory    string `json:"memory"`
	OS        string `json:"os"`
	Go        string `json:"go"`
	LoadStart string `json:"load_start"` // /proc/loadavg at the start
	LoadEnd   string `json:"load_end"`
}

// ThisMachine reads the CPU model and memory from /proc where it can.
func ThisMachine() Machine {
	m := Machine{NumCPU: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version(), LoadStart: loadAvg()}
	m.CPU = procField("/proc/cpuinfo", "model name")
	if kb := procField("/proc/meminfo", "MemTotal"); kb != "" {
		var n int64
		if _, err := fmt.Sscanf(kb, "%d", &n); err == nil {
			m.Memory = fmt.Sprintf("%.1f GiB", float64(n)/(1<<20))
		}
	}
	return m
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func procField(file, key string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Write writes report.md, results.json and the charts into dir (made if
// missing).
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r.Machine.LoadEnd = loadAvg()
	if r.Targets == nil {
		r.Targets = Targets(r.Results)
	}
	r.Charts = nil
	if r.PerGroupCharts {
		for _, g := range groups(r.Results) {
			cs, err := chartSet(dir, slug(g), g, inGroup(r.Results, g))
			if err != nil {
				return err
			}
			r.Charts = append(r.Charts, cs...)
		}
	} else {
		cs, err := chartSet(dir, "all", "backends", r.Results)
		if err != nil {
			return err
		}
		r.Charts = cs
	}
	return writeFiles(dir, "results.json", r, r.Markdown())
}

// writeFiles writes v as indented JSON to dir/jsonName and md to
// dir/report.md.
func writeFiles(dir, jsonName string, v any, md []byte) error {
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, jsonName), append(js, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), md, 0o644)
}

func inGroup(results []*Result, g string) []*Result {
	var out []*Result
	for _, r := range results {
		if r.Subject != nil && r.Subject.Group == g {
			out = append(out, r)
		}
	}
	return out
}

// Markdown renders the report.
func (r *Report) Markdown() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n", r.Title)
	fmt.Fprintf(&b, "Produced on %s (%s to %s) by:\n\n```\n%s\n```\n\n",
		r.Started.UTC().Format("2006-01-02"), r.Started.UTC().Format("15:04:05Z"), r.Finished.UTC().Format("15:04:05Z"), r.Command)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "%s\n\n", n)
	}
	m := r.Machine
	fmt.Fprintf(&b, "## Machine\n\n- CPU: %s, %d logical CPUs (nproc); memory %s; %s; %s\n", m.CPU, m.NumCPU, m.Memory, m.OS, m.Go)
	fmt.Fprintf(&b, "- load average (1, 5, 15 min) at the start: %s; at the end: %s — the machine is shared, so absolute figures are noisy: compare ratios\n\n", m.LoadStart, m.LoadEnd)
	if len(r.Servers) > 0 {
		b.WriteString("## Servers\n\n")
		t := Table{{"server", "version", "address"}}
		for _, s := range r.Servers {
			t = append(t, []string{s.Name, s.Version, s.Address})
		}
		t.WriteMarkdown(&b)
		b.WriteString("\n")
	}
	c := r.Config
	fmt.Fprintf(&b, "## Sizes\n\n%d round(s), subjects interleaved within each round (A B C A B C …), each after an untimed warm-up run; "+
		"uncontended: %d acquire+release pairs per round on one key; handoff: %d handoffs per round with %s waiters on one key; "+
		"many keys: %d workers, %d keys, %d pairs per round; %sflash sale (one round: it shows safety; its wall time is set by the paused holders' TTLs, which etcd rounds up to whole seconds and ZooKeeper to the session timeout): %d buyers, %d units, %d paused holders; TTL %v.\n\n",
		c.Rounds, c.Ops, c.Handoffs, joinInts(c.Waiters), c.ManyWorkers, c.ManyKeys, c.ManyOps, semaphoreSizes(c), c.Buyers, c.Stock, c.Pauses, c.TTL)
	if fl := floors(r.Results); len(fl) > 0 {
		b.WriteString("## Floors\n\nThe floor of a group is the bare round trips its protocol needs for one acquire+release, made with the engine's own client in the same run. `p50÷floor` is a row's p50 latency over the floor's uncontended p50; `ops÷floor` its throughput over the floor's in the same workload.\n\n")
		t := Table{{"group", "floor"}}
		for _, s := range fl {
			t = append(t, []string{s.Group, s.Floor})
		}
		t.WriteMarkdown(&b)
		b.WriteString("\n")
	}
	b.WriteString("## Results\n\nLatency percentiles are over every operation of every round; ops/s is total operations over total timed wall time.\n\n")
	ResultsTable(r.Results).WriteMarkdown(&b)
	b.WriteString("\n")
	if t := PeerTable(r.Results); t != nil {
		b.WriteString("## Ours against the peer libraries\n\n`ops ratio` = our throughput ÷ the peer's (above 1: we are faster); `p50 ratio` = our p50 latency ÷ the peer's (below 1: we are faster).\n\n")
		t.WriteMarkdown(&b)
		b.WriteString("\n")
	}
	if t := TargetsTable(r.Targets); t != nil {
		b.WriteString("## Targets\n\n")
		t.WriteMarkdown(&b)
		b.WriteString("\n")
	}
	var v bytes.Buffer
	WriteVerdicts(&v, r.Results)
	if v.Len() > 0 {
		fmt.Fprintf(&b, "## Safety\n\n```\n%s```\n\n", v.String())
	}
	if len(r.Charts) > 0 {
		b.WriteString("## Charts\n\nFloors are dashed, peer libraries dotted. Each chart is also written as PNG beside the SVG.\n\n")
		for _, ch := range r.Charts {
			fmt.Fprintf(&b, "![%s](%s.svg)\n\n", ch.Title, ch.File)
		}
	}
	return b.Bytes()
}

// semaphoreSizes describes the semaphore workload's sizes, if it runs.
func semaphoreSizes(c *Config) string {
	if !c.runs(KindSemaphore) {
		return ""
	}
	return fmt.Sprintf("semaphore: %d permits of one key, %d contenders over %d Lockers, each holding its permit %v, %d permits granted per round; ",
		c.Permits, c.SemContenders, c.SemLockers, c.SemHold, c.SemOps)
}

func floors(results []*Result) []*Subject {
	var out []*Subject
	seen := map[*Subject]bool{}
	for _, r := range results {
		if s := r.Subject; s != nil && s.Role == RoleFloor && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}
