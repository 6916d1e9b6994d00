module schedpolicy.io/bench/admission/go-null-webhook

go 1.26
