module github.com/vrun-go/vrun

go 1.26.0

require (
	github.com/goki/vulkan v1.0.8 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	golang.org/x/sys v0.50.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
