package complexity_test

import "testing"

// interfaceSDL declares @cost and @listSize on interface fields. An implementing field
// that declares none of its own takes the interface's: Book.title costs 4, Film.title
// its own 9; Book.related is sized by first, Film.related by its own assumedSize 1.
const interfaceSDL = `
type Query {
  media: [Media!]! @listSize(assumedSize: 2)
  book: Book
  film: Film
  tag: Tag
  both: Both
}
interface Media {
  title: String @cost(weight: 4)
  related(first: Int): [Media!]! @listSize(slicingArguments: ["first"], requireOneSlicingArgument: false)
  reviews(limit: Int @cost(weight: 5)): [Review!]! @listSize(assumedSize: 2)
}
type Book implements Media {
  title: String
  related(first: Int): [Media!]!
  reviews(limit: Int): [Review!]!
  pages: Int
}
type Film implements Media {
  title: String @cost(weight: 9)
  related(first: Int): [Media!]! @listSize(assumedSize: 1)
  reviews(limit: Int @cost(weight: 1)): [Review!]!
}
type Review { stars: Int }

interface Node { id: ID @cost(weight: 2) }
interface Named implements Node { id: ID name: String }
type Tag implements Named & Node { id: ID name: String }

interface Light { x: Int @cost(weight: 3) }
interface Heavy { x: Int @cost(weight: 7) }
type Both implements Light & Heavy { x: Int }
`

func TestInterfaceFieldDirectives(t *testing.T) {
	schemaAST, s := newTestSchema(t, interfaceSDL)
	checkPrices(t, schemaAST, s, []priceCase{
		{
			name:  "weight from the interface field",
			query: `{ book { title } }`,
			// Book.title takes Media.title's 4: 1 × (1 + 4)
			want: 5,
		},
		{
			name:  "the implementation's own weight wins",
			query: `{ film { title } }`,
			// 1 × (1 + 9)
			want: 10,
		},
		{
			name:  "listSize from the interface field",
			query: `{ book { related(first: 3) { title } } }`,
			// related: n = first = 3; item max(Book 1 + 4, Film 1 + 9) = 10; 3 × 10 = 30; book 1 + 30
			want: 31,
		},
		{
			name:  "the implementation's own listSize wins",
			query: `{ film { related(first: 3) { title } } }`,
			// Film.related: assumedSize 1 (first is no slicing argument there): 1 × 10; film 1 + 10
			want: 11,
		},
		{
			name:  "selected on the interface itself",
			query: `{ media { title } }`,
			// 2 × max(Book 1 + 4, Film 1 + 9)
			want: 20,
		},
		{
			name:  "selected on the interface, narrowed to one type",
			query: `{ media { ... on Book { title } } }`,
			// 2 × max(Book 1 + 4, Film 1 + 0)
			want: 10,
		},
		{
			name:  "argument weight and listSize from the interface field",
			query: `{ book { reviews(limit: 1) { stars } } }`,
			// argCost limit 5 (inherited); n = assumedSize 2 (inherited); 5 + 2 × 1 = 7; book 1 + 7
			want: 8,
		},
		{
			name:  "the implementation's own argument weight wins",
			query: `{ film { reviews(limit: 1) { stars } } }`,
			// argCost 1 + 2 × 1 = 3; film 1 + 3
			want: 4,
		},
		{
			name:  "through a chain of interfaces",
			query: `{ tag { id name } }`,
			// Tag.id takes Node.id's 2 through Named: 1 × (1 + 2 + 0)
			want: 3,
		},
		{
			name:  "several interfaces: the largest weight",
			query: `{ both { x } }`,
			// max(Light 3, Heavy 7): 1 × (1 + 7)
			want: 8,
		},
	})
}

// TestInterfaceFieldDirectivesActual: the actual cost reads the same inherited weights.
func TestInterfaceFieldDirectivesActual(t *testing.T) {
	schemaAST, s := newTestSchema(t, interfaceSDL)
	for _, tc := range []struct {
		name, query, data string
		want              int64
	}{
		// Book.title 4 (inherited): 1 + 4
		{"object field", `{ book { title } }`, `{"book":{"title":"t"}}`, 5},
		// one Film (1 + 9) and one Book (1 + 4), by __typename
		{"interface items", `{ media { __typename title } }`, `{"media":[{"__typename":"Film","title":"f"},{"__typename":"Book","title":"b"}]}`, 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := parseValid(t, schemaAST, tc.query)
			got, err := s.ActualJSON(doc.Operations[0], nil, []byte(tc.data))
			if err != nil || got != tc.want {
				t.Errorf("ActualJSON = %d, %v; want %d", got, err, tc.want)
			}
			if got, err := streamActual(s, doc.Operations[0], nil, []byte(tc.data)); err != nil || got != tc.want {
				t.Errorf("streamed = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
