package complexity

// Defaults of the Options, as docs/graphql.md ("The price") gives them.
const (
	// DefaultListSize is the size of a list with no slicing argument value
	// and no @listSize(assumedSize:) (WithDefaultListSize).
	DefaultListSize = 10
	// DefaultMutationCost is the weight of a root Mutation field without a
	// @cost of its own (WithMutationCost).
	DefaultMutationCost = 10
	// DefaultIntrospectionCost is the cost of each __schema or __type field
	// (WithIntrospectionCost).
	DefaultIntrospectionCost = 1
)
