module github.com/tensorlife/tensorlife/contrib/gomlxtrack

go 1.26.0

require (
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b
	github.com/stretchr/testify v1.12.1
	github.com/tensorlife/tensorlife v0.0.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect

require (
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/gomlx/gomlx v0.26.0
	github.com/pkg/errors v0.9.1 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	golang.org/x/exp v0.0.0-20250819193227-8b4c13bb791b // indirect
	k8s.io/klog/v2 v2.130.1 // indirect
)

replace github.com/tensorlife/tensorlife => ../..
