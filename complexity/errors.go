package complexity

import (
	"errors"
	"fmt"
)

// CodeSlicingArgumentRequired is the GraphQL error code (errors[].extensions.code) of an
// operation that breaks a field's @listSize(requireOneSlicingArgument: true). Costgate
// answers it with HTTP 400.
const CodeSlicingArgumentRequired = "SLICING_ARGUMENT_REQUIRED"

var (
	// ErrFragmentCycle is returned (wrapped) when fragment spreads form a cycle. Only an
	// unvalidated document can hold one; validation reports it too.
	ErrFragmentCycle = errors.New("fragment spreads form a cycle")

	// ErrUnknownOperation is returned (wrapped) when the document has no operation of the
	// requested name, or has several and no name was given.
	ErrUnknownOperation = errors.New("unknown operation")
)

// OperationError rejects an operation before it runs. Code is the GraphQL error code, for
// example [CodeSlicingArgumentRequired]; Field is the schema coordinate ("Query.products")
// and Path the response path ("products" or "shop.products") of the offending field.
type OperationError struct {
	Code    string
	Field   string
	Path    string
	Message string
}

func (e *OperationError) Error() string {
	return fmt.Sprintf("%s: %s", e.Field, e.Message)
}

// SchemaError is one problem with the cost directives of a schema. Coordinate names the
// place: "Type", "Type.field", "Type.field(arg:)" or "Input.field".
type SchemaError struct {
	Coordinate string
	Message    string
	// InCosts is set when the problem is in the WithCosts entry keyed Coordinate,
	// not in the schema's own directives.
	InCosts bool
}

func (e *SchemaError) Error() string {
	return "complexity: " + e.Coordinate + ": " + e.Message
}
