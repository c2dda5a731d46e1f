// Package complexity prices GraphQL operations statically, over gqlparser ASTs, from the
// @cost and @listSize directives of the schema (the IBM GraphQL cost spec, as Apollo
// Router and Cosmo read it). It knows nothing of gqlgen, HTTP or Redis: the gqlgen
// extension and the proxy in limiter/gqllimit build on it.
//
// # Use
//
//	schema, err := complexity.NewSchema(astSchema)          // once; checks the directives
//	schema, err := complexity.LoadSDL("upstream.graphql", sdl) // or from SDL (proxy mode)
//	limits, err := complexity.MeasureDocument(doc)          // parsed, before validation
//	// ... validate the document ...
//	res, err := schema.Analyze(doc, operationName, variables) // requested cost: res.Cost
//	// ... execute ...
//	actual, err := schema.ActualJSON(op, variables, resp.Data) // refund requested − actual
//
// A [*Schema] is immutable and safe for concurrent use; every call works on its own state.
//
// # The formula
//
// The cost of an operation is the sum of its root fields' costs. For a field f of named
// type T,
//
//	cost(f) = argCost(f) + n(f) × (w(f) + Σ cost(children))
//
// where:
//
//   - w(f) is the first of: @cost(weight:) on the field; the mutation cost (10, see
//     [WithMutationCost]) for a root Mutation field; @cost on T; 1 when T is an object,
//     interface or union; 0 for a scalar or an enum.
//   - n(f) is 1 unless f is a list. For a list it is the largest slicing argument with a
//     value (a literal, a variable, or the argument's schema default; null is no value;
//     negative values count as 0), else @listSize(assumedSize:), else the default list
//     size (10, see [WithDefaultListSize]). Each inner level of [[T]] multiplies by the
//     default list size again. A slicing argument that is a list (ids: [ID!]) gives the
//     length of its value; one written as a path ("input.page.first") reads the Int or
//     list at the end of the path through the input objects.
//   - A field named in its parent's @listSize(sizedFields:) takes the parent's size, and
//     the parent then counts once: with products(first: 10) @listSize(sizedFields:
//     ["nodes"]), products counts 1 and products.nodes counts 10. An entry may be a path
//     to a deeper list, "page.items" or, in Apollo's selection syntax,
//     "results { page }": the list at its end takes the size, the fields on the way are
//     priced as usual.
//   - argCost(f) adds the @cost of each argument present in the operation and of each
//     input field present in their values, and the input object cost (0, see
//     [WithInputObjectCost]) of each input object value among them; once per field, not
//     per item.
//   - @cost and @listSize on an interface field apply to each implementing type's field
//     that declares none of its own, whether the operation selects the field on the
//     interface or on the type.
//   - For an interface or union T, the per-item term w + Σ cost(children) is the maximum
//     over T's possible object types, each priced with its own weight, its own field
//     definitions, and only the selections that apply to it.
//   - @skip and @include are honoured; __typename costs 0; __schema and __type cost the
//     introspection cost (1, see [WithIntrospectionCost]) whatever they select. Aliased
//     and repeated selections are each priced (an upper bound).
//   - Sums and products saturate at [MaxCost], 2^53−1.
//
// When requireOneSlicingArgument is true (the IBM default, and the default of
// [DirectivesSDL]), exactly one slicing argument must be given, else the operation is
// rejected with an [*OperationError] of code [CodeSlicingArgumentRequired]. An argument
// with a schema default may be left out. The check applies only to fields that list
// slicing arguments.
//
// # Linear time
//
// Pricing never re-walks a fragment: each is priced once per (fragment, concrete type,
// inherited list size) and reused, and so are the selections of an interface or union
// field for each possible type. A document of 30 fragments that each spread the next
// twice (2^30 expansions) prices in microseconds. [MeasureDocument] counts depth,
// aliases and fields the same way over the whole document (every operation and
// fragment, used or not), and [Measure] over one operation, before validation, on a
// document that may even contain fragment cycles (reported as [ErrFragmentCycle],
// never a hang).
//
// # Caching prices
//
// [Schema.CostVariables] names the variables of an operation that its price depends on
// (@skip/@include conditions, slicing arguments, weighted arguments and input objects):
// two requests that agree on those are priced the same, so a cache of priced operations
// can key on the document and those values alone.
//
// # Actual cost
//
// [Schema.Actual] applies the same formula to a response, with n(f) the number of items
// returned and abstract items priced by their __typename. Fragments are priced once per
// response object, so a fragment bomb's response is priced in linear time too.
//
// A response can say less than what ran: a failing non-null field nulls its parent, and
// a client's alias named __typename can name another type. An executor counts the
// actual cost as it runs instead: [Schema.NewExecPlan] once per operation, then an
// [ExecCount] per execution, told what each field's resolver returned
// ([ExecCount.Add]). A root mutation field then costs its whole price once called.
//
// # Finding the directives
//
// The directives are found by name, @cost and @listSize, unless the schema links the
// cost spec, `schema @link(url: "https://specs.apollo.dev/cost/v0.1", import: [...])` or
// the same in `extend schema`. Then they have the names the link gives them, by the link
// spec's rules: an import names what it imports, renamed or not
// (`{name: "@cost", as: "@weight"}`, `"@listSize"`); what is not imported is @cost (the
// directive named like the spec, or the link's as:) and @cost__listSize. An @link of
// Apollo Federation (https://specs.apollo.dev/federation/v2.x) may import them too, or
// leave them namespaced as @federation__cost.
//
// A schema that links a cost spec costgate does not understand is refused, never priced
// without its rules: another version, an import of anything but @cost and @listSize, or
// a plain @cost where the link names the directive otherwise.
//
// # Schemas you cannot annotate
//
// [WithCosts] gives the settings of @cost and @listSize from outside the schema, keyed by
// schema coordinate ("Query.products", "Product", "Query.search(limit:)",
// "ReviewInput.body"): each replaces the directive of its kind at its coordinate and is
// checked by the same rules. An entry that names nothing in the schema is an error.
//
// # Schema errors
//
// [NewSchema] rejects, naming the place (Type.field, Type.field(arg:), Input.field): a
// weight that is not a non-negative integer; @listSize on a field that is neither a list
// nor a connection naming its lists in sizedFields; a sizedFields path through a field
// the type lacks, or ending at one that is not a list; a slicing argument that is neither
// an Int nor a list argument (a path such as "filter.max" must end at an Int or list
// input field, through input objects).
package complexity
