// SPDX-License-Identifier: MIT

// A Go service holding a large in-memory map: sessions keyed by token, each with a user, an
// address, timestamps, counters and a small history, plus an HTTP endpoint on loopback to read
// them (so the process looks like a real service). Prints READY <pid> when the map is built.
//
//	go run . [-sessions N] [-addr 127.0.0.1:0]
package main

import (
	"flag"
	"fmt"
	"math/rand"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"time"
)

type Session struct {
	Token    string
	UserID   int64
	UserName string
	RemoteIP string
	Created  time.Time
	LastSeen time.Time
	Requests uint32
	Bytes    uint64
	Roles    []string
	History  []int32
}

func main() {
	n := flag.Int("sessions", 600000, "sessions held in the map")
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	rnd := rand.New(rand.NewSource(42))
	roles := []string{"reader", "writer", "admin", "billing", "support"}
	sessions := make(map[string]*Session)
	base := time.Unix(1_700_000_000, 0)
	for i := 0; i < *n; i++ {
		tok := fmt.Sprintf("%016x%08x", rnd.Uint64(), i)
		uid := int64(rnd.Intn(*n/3) + 1)
		s := &Session{
			Token:    tok,
			UserID:   uid,
			UserName: "user" + strconv.FormatInt(uid, 10),
			RemoteIP: fmt.Sprintf("10.%d.%d.%d", rnd.Intn(256), rnd.Intn(256), rnd.Intn(256)),
			Created:  base.Add(time.Duration(rnd.Intn(86400)) * time.Second),
			Requests: uint32(rnd.Intn(1000)),
			Bytes:    uint64(rnd.Intn(1 << 24)),
		}
		s.LastSeen = s.Created.Add(time.Duration(rnd.Intn(3600)) * time.Second)
		for k := rnd.Intn(3); k >= 0; k-- {
			s.Roles = append(s.Roles, roles[rnd.Intn(len(roles))])
		}
		h := rnd.Intn(12)
		for k := 0; k < h; k++ {
			s.History = append(s.History, int32(rnd.Intn(500)))
		}
		sessions[tok] = s
	}
	runtime.GC()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	http.HandleFunc("/session", func(w http.ResponseWriter, r *http.Request) {
		if s, ok := sessions[r.URL.Query().Get("token")]; ok {
			fmt.Fprintf(w, "%s %d %s\n", s.UserName, s.Requests, s.RemoteIP)
			return
		}
		http.NotFound(w, r)
	})
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("READY %d sessions=%d heap_inuse_mb=%d listen=%s\n", os.Getpid(), len(sessions), ms.HeapInuse>>20, ln.Addr())
	_ = http.Serve(ln, nil)
}
