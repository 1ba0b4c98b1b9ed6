module thinstream/interop/pionpeer

go 1.24.0

require (
	github.com/pion/logging v0.2.4
	github.com/pion/sctp v1.11.3
)

require (
	github.com/pion/randutil v0.1.0 // indirect
	github.com/pion/transport/v5 v5.0.1 // indirect
)
