module libswacache/bindings/go

go 1.19
