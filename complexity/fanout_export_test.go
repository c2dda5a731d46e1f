package complexity

// The fan-out documents, for the external tests too.
var (
	FanOutQuery     = fragmentFanOut
	PathFanOutQuery = pathFanOut
)
