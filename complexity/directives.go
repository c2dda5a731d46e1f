package complexity

// DirectivesSDL declares @cost and @listSize as Apollo Federation does (an Int weight).
// Prepend it to a schema that uses the directives without declaring them:
//
//	gqlparser.LoadSchema(&ast.Source{Name: "cost.graphql", Input: complexity.DirectivesSDL}, src)
//
// A schema may instead declare them itself, in this form or in the IBM cost spec's
// (`directive @cost(weight: String!)`); [NewSchema] reads the argument values, not the
// declaration, so weights may be written 5 or "5" under either.
const DirectivesSDL = `directive @cost(weight: Int!) on ARGUMENT_DEFINITION | ENUM | FIELD_DEFINITION | INPUT_FIELD_DEFINITION | OBJECT | SCALAR

directive @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION
`

const (
	costDirective     = "cost"
	listSizeDirective = "listSize"
)

// directiveNames are the names under which a schema writes @cost and @listSize. Without
// an @link of the cost spec they are the plain names; with one, the names it gives them
// (imported, renamed, or namespaced as @cost__listSize), and only those.
type directiveNames struct {
	cost, listSize []string
	// link describes the @link that named them, for errors; "" when none did.
	link string
}
