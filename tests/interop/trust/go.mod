module stele/tests/interop/trust

go 1.18

require golang.org/x/mod v0.17.0
