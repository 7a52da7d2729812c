module github.com/libswacache/libswacache/bindings/go

go 1.19
