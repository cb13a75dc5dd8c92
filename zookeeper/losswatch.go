package zookeeper

import (
	"reflect"
	"sync"

	"github.com/go-zookeeper/zk"
)

// lossShardSize is how many held locks' loss watches one goroutine waits on.
// go-zookeeper delivers each watch on a channel of its own, so a goroutine
// per held lock waited on one: a goroutine and its stack per lease. A shard
// waits on its channels with reflect.Select, whose cost grows with the
// number of cases; it is paid when a lock joins or leaves its shard or a
// watch fires, not while locks are held.
const lossShardSize = 128

// lossWatchers are the goroutines that wait on the held locks' loss
// watches (the watch on each lock's own node, see lock.rewatch). A shard's
// goroutine runs while the shard has locks and ends when it has none, or
// when the backend closes.
type lossWatchers struct {
	b      *backend
	mu     sync.Mutex
	shards []*lossShard
}

type lossShard struct {
	wake chan struct{} // the set of watches changed; capacity 1
	// Guarded by lossWatchers.mu.
	watches map[*lock]<-chan zk.Event
	running bool
}

// add waits on ch, lock l's loss watch, until it fires or l is finished.
func (w *lossWatchers) add(l *lock, ch <-chan zk.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l.finished.Load() || w.b.ctx.Err() != nil {
		return // released meanwhile (finish found nothing to remove), or closed
	}
	var s *lossShard
	for _, c := range w.shards {
		if len(c.watches) < lossShardSize {
			s = c
			break
		}
	}
	if s == nil {
		s = &lossShard{wake: make(chan struct{}, 1), watches: make(map[*lock]<-chan zk.Event)}
		w.shards = append(w.shards, s)
	}
	s.watches[l] = ch
	l.shard = s
	if !s.running {
		s.running = true
		w.b.wg.Add(1)
		go w.run(s)
	}
	s.poke()
}

// remove stops waiting on l's loss watch. Called after l.finished is set,
// it cannot race an add that would put l back (add checks it under mu).
func (w *lossWatchers) remove(l *lock) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := l.shard; s != nil {
		delete(s.watches, l)
		l.shard = nil
		s.poke()
	}
}

func (s *lossShard) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run waits on shard s's watches. A watch that fires leaves the shard (a
// ZooKeeper watch fires once) and its lock handles the event on a goroutine
// of its own, which sets the next watch and adds it again.
func (w *lossWatchers) run(s *lossShard) {
	defer w.b.wg.Done()
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.wake)},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.b.closing)},
	}
	var locks []*lock
	for {
		w.mu.Lock()
		if len(s.watches) == 0 {
			s.running = false
			w.mu.Unlock()
			return
		}
		cases, locks = cases[:2], locks[:0]
		for l, ch := range s.watches {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
			locks = append(locks, l)
		}
		w.mu.Unlock()
		i, v, _ := reflect.Select(cases)
		switch i {
		case 0:
			continue
		case 1:
			return
		}
		l := locks[i-2]
		w.mu.Lock()
		current := l.shard == s
		if current {
			delete(s.watches, l)
			l.shard = nil
		}
		w.mu.Unlock()
		if !current {
			continue // finished while the select ran
		}
		ev, _ := v.Interface().(zk.Event) // the zero event when the channel was closed
		w.b.wg.Add(1)
		go func() {
			defer w.b.wg.Done()
			l.lossEvent(ev)
		}()
	}
}
