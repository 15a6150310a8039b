package shaders

//go:generate go run ./gen
