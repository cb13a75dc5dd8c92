package floor

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/locker/benchkit"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// StatForURL returns a probe of the server behind a locker URL for the scale
// workload, or nil (and no error) where there is none here: memory://, TLS
// or authenticated etcd and ZooKeeper, Redis Cluster and Sentinel. It reads
// each server's own accounting:
//
//	redis      INFO memory used_memory, INFO cpu (summed over Redlock's masters)
//	etcd       /metrics: RSS, db size in use, CPU seconds
//	zookeeper  mntr: approximate data size, znodes, ephemerals (no CPU)
//	postgres   the lock table's size, pg_locks rows, backends (no CPU)
func StatForURL(ctx context.Context, rawURL string) (benchkit.ServerStat, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	switch strings.ToLower(u.Scheme) {
	case "redis", "redlock":
		if q.Get("cluster") != "" || q.Get("master_name") != "" || q.Get("tls") != "" {
			return nil, nil
		}
		var s redisStat
		for _, h := range strings.Split(u.Host, ",") {
			o := &redis.Options{Addr: withPorts(h, "6379")[0], Username: u.User.Username()}
			o.Password, _ = u.User.Password()
			s = append(s, redis.NewClient(o))
		}
		return s, nil
	case "etcd":
		if q.Get("tls") != "" || q.Get("ca_file") != "" || u.User != nil {
			return nil, nil
		}
		return etcdStat{url: "http://" + withPorts(u.Host, "2379")[0] + "/metrics"}, nil
	case "zookeeper":
		if u.User != nil {
			return nil, nil
		}
		return zkStat{addr: withPorts(u.Host, "2181")[0]}, nil
	case "postgres", "postgresql":
		schema, table := q.Get("schema"), q.Get("table")
		if schema == "" {
			schema = "public"
		}
		if table == "" {
			table = "locker_locks"
		}
		for _, p := range []string{"table", "schema", "max_conns", "skip_schema_creation", "mode", "pool_max_conns"} {
			q.Del(p)
		}
		v := *u
		v.RawQuery = q.Encode()
		c, err := pgx.Connect(ctx, v.String())
		if err != nil {
			return nil, fmt.Errorf("server probe for %s: %w", u.Redacted(), err)
		}
		return &pgStat{c: c, table: pgx.Identifier{schema, table}.Sanitize()}, nil
	}
	return nil, nil
}

type redisStat []*redis.Client

func (s redisStat) Sample(ctx context.Context) (benchkit.ServerSample, error) {
	out := benchkit.ServerSample{MemoryWhat: "Redis used_memory", Detail: map[string]float64{}}
	for _, c := range s {
		info, err := c.Info(ctx, "memory", "cpu", "keyspace").Result()
		if err != nil {
			return out, err
		}
		f := fields(info, ":")
		out.Memory += f["used_memory"]
		out.CPU += f["used_cpu_sys"] + f["used_cpu_user"]
		n, err := c.DBSize(ctx).Result()
		if err != nil {
			return out, err
		}
		out.Detail["keys"] += float64(n)
	}
	return out, nil
}

func (s redisStat) Close() error {
	for _, c := range s {
		_ = c.Close()
	}
	return nil
}

type etcdStat struct{ url string }

func (s etcdStat) Sample(ctx context.Context) (benchkit.ServerSample, error) {
	out := benchkit.ServerSample{MemoryWhat: "etcd RSS", CPU: -1}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return out, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return out, err
	}
	f := fields(string(b), " ")
	out.Memory, out.CPU = f["process_resident_memory_bytes"], f["process_cpu_seconds_total"]
	out.Detail = map[string]float64{
		"db bytes in use": f["etcd_mvcc_db_total_size_in_use_in_bytes"],
		"keys":            f["etcd_debugging_mvcc_keys_total"],
	}
	return out, nil
}

func (etcdStat) Close() error { return nil }

type zkStat struct{ addr string }

func (s zkStat) Sample(ctx context.Context) (benchkit.ServerSample, error) {
	out := benchkit.ServerSample{MemoryWhat: "ZooKeeper approximate data size", CPU: -1}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return out, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("mntr")); err != nil {
		return out, err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return out, err
	}
	f := fields(string(b), "\t")
	out.Memory = f["zk_approximate_data_size"]
	out.Detail = map[string]float64{"znodes": f["zk_znode_count"], "ephemerals": f["zk_ephemerals_count"], "watches": f["zk_watch_count"]}
	return out, nil
}

func (zkStat) Close() error { return nil }

type pgStat struct {
	c     *pgx.Conn
	table string
}

func (s *pgStat) Sample(ctx context.Context) (benchkit.ServerSample, error) {
	out := benchkit.ServerSample{MemoryWhat: "PostgreSQL lock table size", CPU: -1}
	var size, locks, advisory, backends float64
	err := s.c.QueryRow(ctx, "SELECT coalesce(pg_total_relation_size(to_regclass($1)), 0)::float8, "+
		"(SELECT count(*) FROM pg_locks)::float8, (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory')::float8, "+
		"(SELECT count(*) FROM pg_stat_activity WHERE datname = current_database())::float8", s.table).
		Scan(&size, &locks, &advisory, &backends)
	out.Memory = size
	out.Detail = map[string]float64{"pg_locks rows": locks, "advisory locks": advisory, "backends": backends}
	return out, err
}

func (s *pgStat) Close() error { return s.c.Close(context.Background()) }

// fields parses "name<sep>value" lines into numbers, skipping the rest.
func fields(text, sep string) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), sep)
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		if n, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			out[k] = n
		}
	}
	return out
}

// ConnBudget is the connection budget a PostgreSQL Locker takes by default:
// a quarter of the server's max_connections.
func (s *pgStat) ConnBudget(ctx context.Context) (int, error) {
	var n int
	err := s.c.QueryRow(ctx, "SELECT current_setting('max_connections')::int / 4").Scan(&n)
	return n, err
}
