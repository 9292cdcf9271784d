module newsflow/perf/bench_gofeed

go 1.25.0

require github.com/mmcdole/gofeed v1.4.2

require (
	github.com/mmcdole/goxpp/v2 v2.0.0 // indirect
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/text v0.40.0 // indirect
)
