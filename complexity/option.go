package complexity

// Option configures a [Schema] built by [NewSchema].
type Option func(*config)

type config struct {
	defaultListSize   int64
	mutationCost      int64
	introspectionCost int64
	inputObjectCost   int64
	costs             Costs
}

func defaultConfig() config {
	return config{
		defaultListSize:   DefaultListSize,
		mutationCost:      DefaultMutationCost,
		introspectionCost: DefaultIntrospectionCost,
	}
}

// WithDefaultListSize sets the size assumed for a list field that has no slicing argument
// value and no @listSize(assumedSize:), and the factor of each inner level of a nested
// list such as [[T]]. Default 10.
func WithDefaultListSize(n int) Option {
	return func(c *config) { c.defaultListSize = int64(n) }
}

// WithMutationCost sets the weight of a root Mutation field that has no @cost of its
// own. Default 10.
func WithMutationCost(n int) Option {
	return func(c *config) { c.mutationCost = int64(n) }
}

// WithIntrospectionCost sets the cost of each __schema or __type field, whatever it
// selects. Default 1.
func WithIntrospectionCost(n int) Option {
	return func(c *config) { c.introspectionCost = int64(n) }
}

// WithInputObjectCost sets the weight of each input object value in a field's arguments,
// nested ones included and each element of a list of them: with 1,
// filter: {range: {min: 1}} adds 2. It is counted once per field, like the @cost of the
// arguments, not multiplied by the field's list size. Default 0 (only @cost weights
// count); Apollo Router and the IBM spec count 1.
func WithInputObjectCost(n int) Option {
	return func(c *config) { c.inputObjectCost = int64(n) }
}

// AnalyzeOption configures one call of [Schema.Analyze] or [Schema.AnalyzeOperation].
type AnalyzeOption func(*analyzeConfig)

type analyzeConfig struct {
	breakdown bool
}

// WithBreakdown also fills [Result.Breakdown], the cost per field path. It is meant for
// debugging (the Costgate-Cost-Debug header): it allocates, where plain pricing does not.
func WithBreakdown() AnalyzeOption {
	return func(c *analyzeConfig) { c.breakdown = true }
}
