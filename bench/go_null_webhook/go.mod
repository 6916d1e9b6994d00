module schedpolicy.io/bench/go-null-webhook

go 1.26
