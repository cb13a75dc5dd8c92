package benchkit

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Progress draws a bar on a terminal while a long run works. A nil
// *Progress, or one made for a non-terminal, counts nothing and draws nothing,
// so that workloads can call it unconditionally.
type Progress struct {
	w     io.Writer
	total int64
	done  atomic.Int64
	what  atomic.Value // string: the workload and backend running now
	stop  chan struct{}
	wg    sync.WaitGroup
}

const (
	progressDelay  = 500 * time.Millisecond // short runs never show a bar
	progressPeriod = 100 * time.Millisecond
	progressWidth  = 30
)

// NewProgress returns a progress bar on w, or nil when w is not a terminal:
// a bar's carriage returns would only litter a log file.
func NewProgress(w io.Writer, terminal bool) *Progress {
	if !terminal {
		return nil
	}
	return &Progress{w: w}
}

func (p *Progress) start(total int) {
	if p == nil {
		return
	}
	p.total = int64(total)
	p.what.Store("")
	p.stop = make(chan struct{})
	p.wg.Add(1)
	go p.draw()
}

func (p *Progress) add(n int) {
	if p != nil {
		p.done.Add(int64(n))
	}
}

func (p *Progress) label(s string) {
	if p != nil {
		p.what.Store(s)
	}
}

// finish stops drawing and clears the bar's line.
func (p *Progress) finish() {
	if p == nil {
		return
	}
	close(p.stop)
	p.wg.Wait()
}

func (p *Progress) draw() {
	defer p.wg.Done()
	delay := time.NewTimer(progressDelay)
	defer delay.Stop()
	select {
	case <-p.stop:
		return
	case <-delay.C:
	}
	tick := time.NewTicker(progressPeriod)
	defer tick.Stop()
	for {
		fmt.Fprintf(p.w, "\r\033[K%s", p.line())
		select {
		case <-p.stop:
			fmt.Fprint(p.w, "\r\033[K")
			return
		case <-tick.C:
		}
	}
}

// line renders the bar: [=========>          ]  45%  handoff memory://
func (p *Progress) line() string {
	frac := 0.0
	if p.total > 0 {
		frac = min(1, float64(p.done.Load())/float64(p.total))
	}
	filled := int(frac * progressWidth)
	bar := strings.Repeat("=", filled)
	if filled < progressWidth {
		bar += ">" + strings.Repeat(" ", progressWidth-filled-1)
	}
	return fmt.Sprintf("[%s] %3.0f%%  %s", bar, frac*100, p.what.Load())
}
