// costlink.mjs: reading costgate's extensions.cost and the HTTP status
// with Apollo Client 4, whose query results drop both.
//
//	go run .                                    # in the repository root
//	cd examples/apollo && npm install && node costlink.mjs
import { ApolloClient, InMemoryCache, HttpLink, ApolloLink, gql } from "@apollo/client";
import { map } from "rxjs";

// costLink hands each operation's cost and HTTP status to onCost.
const costLink = (onCost) => new ApolloLink((operation, forward) =>
  forward(operation).pipe(map((result) => {
    const { response } = operation.getContext();
    onCost({ operation: operation.operationName, status: response?.status,
      cost: result.extensions?.cost, code: result.errors?.[0]?.extensions?.code });
    return result;
  })));

const client = new ApolloClient({
  link: ApolloLink.from([
    costLink(console.log),
    new HttpLink({ uri: "http://localhost:8080/graphql", headers: { "X-API-Key": "demo-free" } }),
  ]),
  cache: new InMemoryCache(),
});

const Shop = gql`query Shop { products(first: 10) { nodes { title variants(first: 5) { sku } } } }`;
for (let i = 0; i < 40; i++) {
  try {
    await client.query({ query: Shop, fetchPolicy: "network-only" });
  } catch (e) {
    // A throttled operation: CombinedGraphQLErrors whose first error has
    // extensions {code: "THROTTLED", retryAfterSec: N}.
    console.log(e.name, JSON.stringify(e.errors?.[0]?.extensions));
    break;
  }
}
