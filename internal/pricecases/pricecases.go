// Package pricecases is the price table of costgate's tests: the schema of the cost
// tests ([SDL]), operations of it with the responses they got and their hand-worked
// actual costs ([Actual]), and operations whose responses the tests generate
// ([Operations]). complexity's tests price the responses; gqllimit's run gqlgen over
// the same data and check that the actual cost counted from the execution agrees, and
// differs only where the response says something else than what ran.
package pricecases

import (
	_ "embed"
	"fmt"
	"strings"
)

// SDL is the schema of the cost tests.
//
//go:embed schema.graphql
var SDL string

// Case is an operation of [SDL] with the data of its response and its actual cost.
type Case struct {
	Name  string
	Query string
	Vars  map[string]any
	// Data is the response's "data", as complexity prices it.
	Data string
	// Requested is the operation's price; Want the actual cost of Data (the comments
	// work the formula).
	Requested, Want int64
	// Fixture is what the resolvers return when Data does not say it all (the type of
	// an item the operation does not ask __typename of, as "$type"); "": Data.
	Fixture string
	// Exec is the actual cost counted from the execution when it is not Want (0: Want),
	// and Why says why.
	Exec int64
	Why  string
	// Lies says why the reply gqlgen writes for Fixture prices otherwise than what
	// ran ("": it agrees).
	Lies string
}

// Actual is the table of actual costs.
var Actual = []Case{
	{
		Name:      "worked example, lists shorter than requested",
		Query:     `{ products(first: 10) { nodes { id title variants(first: 5) { id } } } }`,
		Data:      `{"products":{"nodes":[{"id":"1","title":"a","variants":[{"id":"v"}]},{"id":"2","title":"b","variants":[{"id":"w"},{"id":"x"},{"id":"y"}]}]}}`,
		Requested: 61,
		// node 1: 1+1×1=2; node 2: 1+3×1=4; products 1×(1+6)
		Want: 7,
	},
	{
		Name:      "empty list",
		Query:     `{ products(first: 10) { nodes { id } } }`,
		Data:      `{"products":{"nodes":[]}}`,
		Requested: 11,
		Want:      1, // products 1×(1+0)
	},
	{
		Name:      "null field",
		Query:     `{ products(first: 10) { nodes { id } } product(id: "1") { price } }`,
		Data:      `{"products":null,"product":null}`,
		Requested: 14,
		Want:      0,
	},
	{
		Name:      "null items of a list do not count",
		Query:     `{ reviews(first: 5) { id } }`,
		Data:      `{"reviews":[{"id":"1"},null,{"id":"3"}]}`,
		Requested: 10,
		Want:      4, // 2 items × Review 2
		Lies:      "null propagation: reviews is [Review!]!, so the null item nulls the list, and data",
	},
	{
		Name:      "union priced by __typename",
		Query:     `{ search(term: "x", limit: 4) { __typename ... on Product { variants(first: 10) { id } } } }`,
		Data:      `{"search":[{"__typename":"Shop"},{"__typename":"Product","variants":[{"id":"1"},{"id":"2"}]},{"__typename":"Review"}]}`,
		Requested: 44,
		// Shop 5 + Product (1+2×1) + Review 2
		Want: 10,
	},
	{
		Name:      "union without __typename: the maximum over the types",
		Query:     `{ search(term: "x", limit: 4) { ... on Product { variants(first: 10) { id } } } }`,
		Data:      `{"search":[{"variants":[{"id":"1"},{"id":"2"},{"id":"3"},{"id":"4"},{"id":"5"},{"id":"6"}]},{}]}`,
		Requested: 44,
		// item 1: max(Product 1+6=7, Shop 5, Review 2) = 7; item 2: max(1, 5, 2) = 5
		Want:    12,
		Fixture: `{"search":[{"$type":"Product","variants":[{"id":"1"},{"id":"2"},{"id":"3"},{"id":"4"},{"id":"5"},{"id":"6"}]},{"$type":"Review"}]}`,
		Exec:    9, // Product 1+6, Review 2
		Why:     "the execution knows the second item is a Review; the reply does not say",
		Lies:    "the reply does not name the types: the second item is priced as the costliest",
	},
	{
		Name:      "aliased __typename",
		Query:     `{ search(term: "x", limit: 4) { t: __typename ... on Shop { name } } }`,
		Data:      `{"search":[{"t":"Review"}]}`,
		Requested: 20,
		Want:      2, // Review, not the maximum (Shop 5)
		Fixture:   `{"search":[{"$type":"Review"}]}`,
	},
	{
		Name:      "interface field weights by concrete type",
		Query:     `{ named { __typename name } }`,
		Data:      `{"named":[{"__typename":"Shop","name":"s"},{"__typename":"User","name":"u"}]}`,
		Requested: 14,
		Want:      12, // Shop 5 + User (1+6)
	},
	{
		Name:      "aliases map to response keys",
		Query:     `{ a: product(id: "1") { price } b: product(id: "2") { price } }`,
		Data:      `{"a":{"price":"1.00"},"b":null}`,
		Requested: 6,
		Want:      3, // a: 1+2; b: null
	},
	{
		Name:      "inner lists count their items",
		Query:     `{ grid { x } }`,
		Data:      `{"grid":[[{"x":1},{"x":2}],[{"x":3}],[]]}`,
		Requested: 100,
		Want:      3,
	},
	{
		Name:      "fragments on the response",
		Query:     `{ products(first: 3) { nodes { ...PF } } } fragment PF on Product { price variants(first: 2) { id } }`,
		Data:      `{"products":{"nodes":[{"price":"1","variants":[]},{"price":"2","variants":[{"id":"v"}]}]}}`,
		Requested: 1 + 3*(1+2+2),
		// node 1: 1+2+0; node 2: 1+2+1; products 1+(3+4)
		Want: 8,
	},
	{
		Name:      "skipped field is absent",
		Query:     `query($s: Boolean!) { product(id: "1") { price @skip(if: $s) } }`,
		Vars:      map[string]any{"s": true},
		Data:      `{"product":{}}`,
		Requested: 1,
		Want:      1,
	},
	{
		Name:      "mutation: mutation_cost and argument cost",
		Query:     `mutation { createProduct(input: {title: "t", price: 5}) { id } }`,
		Data:      `{"createProduct":{"id":"1"}}`,
		Requested: 14,
		Want:      14, // 4 + 1×10
	},
	{
		Name:      "introspection",
		Query:     `{ __schema { types { name } } }`,
		Data:      `{"__schema":{"types":[{"name":"Query"}]}}`,
		Requested: 1,
		Want:      1,
	},
}

// Operations are operations of [SDL] whose responses the tests generate; the last
// [LongWay] are the ones complexity's one-pass scan hands to its long reading (two
// fields under one key, @skip on a variable). [OperationVars] are their variables.
var Operations = []string{
	`{ products(first: 3) { totalCount nodes { id title price variants(first: 2) { id sku } reviewConnection(first: 2) { totalCount nodes { id body author { id name } } } } edges { cursor node { id } } } }`,
	`{ grid { x } pricedGrid(rows: 3) { x } tags money currency expensive }`,
	`{ a: product(id: "1") { id } b: product(id: "2") { ...P ...P } } fragment P on Product { title variants(first: 3) { id } related(first: 2) { ...P2 } } fragment P2 on Product { id price }`,
	`query($f: ProductFilter, $n: Int) { filtered(filter: $f, first: $n) { id price } bulk(filters: [{minPrice: 1}, {category: {name: "x"}}]) { id } shelf(first: $n) { rows { products { id } } top { products { title } } } }`,
	`{ shop { id name } cheapShop { id } reviews(first: 3) { id author { name } } categories { id } __typename __type(name: "Product") { name } }`,
	`{ ... on Query { product(id: "1") { id variants(first: 1) { id } } } ...Q } fragment Q on Query { shop { name } }`,
	`mutation { deleteProduct(id: "1") touch createProduct(input: {title: "t", price: 2}) { id variants(first: 2) { id } } }`,
	`{ search(term: "x", limit: 3) { __typename ... on Product { id variants(first: 2) { id } } ... on Shop { name } } node(id: "1") { id } named { name } featured { __typename } }`,
	`{ search(term: "x", limit: 2) { t: __typename ... on Review { author { name } } ... on Product { related(first: 2) { id } } } nodes(ids: ["1"]) { id ... on User { name } ... on Product { variants(first: 2) { id } } } }`,
	FanOut(30), // each variant selected 2^30 times
	PathFanOut(4),
	`{ product(id: "1") { variants(first: 2) { id } } ... on Query { product(id: "1") { related(first: 2) { id } } } }`,
	`query($v: Boolean!) { product(id: "1") { id variants(first: 2) @skip(if: $v) { id } } }`,
}

// LongWay is how many of the last [Operations] complexity's scan does not price itself.
const LongWay = 2

// OperationVars are the variables of [Operations].
func OperationVars() map[string]any {
	return map[string]any{"f": map[string]any{"minPrice": 3, "category": map[string]any{"name": "a"}}, "n": int64(4), "v": true}
}

// FanOut is the classic fragment bomb: F_i spreads F_{i+1} twice, so the document is
// linear in depth and expands to 2^depth copies of the leaf, a list field.
func FanOut(depth int) string {
	var b strings.Builder
	b.WriteString("query { products(first: 1000000) { nodes { ...F0 } } }\n")
	for i := range depth {
		fmt.Fprintf(&b, "fragment F%d on Product { ...F%d ...F%d }\n", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on Product { variants(first: 100) { id } }\n", depth)
	return b.String()
}

// PathFanOut doubles the number of distinct response paths at each level.
func PathFanOut(depth int) string {
	var b strings.Builder
	b.WriteString("query { product(id: \"1\") { ...F0 } }\n")
	for i := range depth {
		fmt.Fprintf(&b, "fragment F%d on Product { a: related(first: 1) { ...F%d } b: related(first: 1) { ...F%d } }\n", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on Product { id }\n", depth)
	return b.String()
}
