// bench_gofeed — gofeed (github.com/mmcdole/gofeed), the Go feed parser, as a parse peer of
// newsflow (perf/parse/compare.py): the file is read once, then parsed K times in-process with
// gofeed's universal parser (RSS, Atom, JSON Feed into one model). One JSON line per run on
// stdout: {"bench":"parse.gofeed","seconds":S,"cpu_seconds":C,"items":N}.
// Usage: bench_gofeed FILE [RUNS]
package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/mmcdole/gofeed"
)

func cpu() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bench_gofeed FILE [RUNS]")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench_gofeed:", err)
		os.Exit(2)
	}
	runs := 3
	if len(os.Args) > 2 {
		if runs, err = strconv.Atoi(os.Args[2]); err != nil || runs < 1 {
			fmt.Fprintln(os.Stderr, "bench_gofeed: RUNS must be a positive integer")
			os.Exit(2)
		}
	}
	p := gofeed.NewParser()
	for r := 0; r <= runs; r++ { // run 0 warms up
		t0, c0 := time.Now(), cpu()
		f, err := p.Parse(bytes.NewReader(data))
		secs, csecs := time.Since(t0).Seconds(), cpu()-c0
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench_gofeed:", err)
			os.Exit(1)
		}
		if r > 0 {
			fmt.Printf("{\"bench\":\"parse.gofeed\",\"seconds\":%.4f,\"cpu_seconds\":%.4f,\"items\":%d}\n",
				secs, csecs, len(f.Items))
		}
	}
}
