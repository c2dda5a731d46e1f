package jsonkeys_test

import (
	"errors"
	"fmt"

	"github.com/costgate/costgate/internal/jsonkeys"
)

// A GraphQL request body whose persisted-query hash is named twice, once in
// another letter case: encoding/json would read the last, gqlgen the exact
// key. Check refuses it before either reads it.
func ExampleCheck() {
	graphQL := jsonkeys.Names{
		"query": nil, "operationName": nil, "variables": nil,
		"extensions": {"persistedQuery": {"version": nil, "sha256Hash": nil}},
	}
	for _, body := range []string{
		`{"query":"{ a }","extensions":{"persistedQuery":{"version":1,"sha256Hash":"ab"}}}`,
		`{"extensions":{"persistedQuery":{"sha256Hash":"ab","SHA256HASH":"cd"}}}`,
		`{"query":"{ a }","\u0071uery":"{ b }"}`,
		`{"query":`,
	} {
		err := jsonkeys.Check([]byte(body), graphQL)
		var ambiguous *jsonkeys.Error
		switch {
		case errors.As(err, &ambiguous):
			fmt.Println("ambiguous:", ambiguous)
		case err != nil:
			fmt.Println("invalid:", errors.Is(err, jsonkeys.ErrSyntax))
		default:
			fmt.Println("ok")
		}
	}
	// Output:
	// ok
	// ambiguous: "extensions.persistedQuery" has "SHA256HASH", "sha256Hash" in another letter case
	// ambiguous: the object has "query" more than once
	// invalid: true
}
