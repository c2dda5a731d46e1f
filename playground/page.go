package playground

import (
	_ "embed"
	"html/template"
)

// costPanelJS is the cost panel plugin, inlined in the page's script.
//
//go:embed costpanel.js
var costPanelJS string

// page is gqlgen v0.17.98's GraphiQL page (graphql/playground/playground.go)
// as its Handler renders it with no options, with the CDN URLs replaced by the
// embedded copies, a CSP nonce on the inline script, and an empty icon (so
// that the browser does not ask for /favicon.ico); and costgate's cost panel
// (costpanel.js), a GraphiQL plugin, with the fetcher wrapped so that the
// panel sees each run's extensions.cost.
var page = template.Must(template.New("graphiql").Parse(`<!DOCTYPE html>
<html>
  <head>
  	<meta charset="utf-8">
  	<title>{{.Title}}</title>
	<link rel="icon" href="data:,">
	<style>
		body {
			margin: 0;
		}

		#graphiql {
			height: 100vh;
		}

		.loading {
        	height: 100%;
        	display: flex;
        	align-items: center;
        	justify-content: center;
        	font-size: 4rem;
		}
	</style>
	<script
		src="{{.ReactUrl}}"
		integrity="{{.ReactSRI}}"
		crossorigin="anonymous"
	></script>
	<script
		src="{{.ReactDOMUrl}}"
		integrity="{{.ReactDOMSRI}}"
		crossorigin="anonymous"
	></script>
	<link
		rel="stylesheet"
		href="{{.CssUrl}}"
		integrity="{{.CssSRI}}"
		crossorigin="anonymous"
	/>
  </head>
  <body>
    <div id="graphiql">
		<div class="loading">Loading…</div>
	</div>

	<script
		src="{{.JsUrl}}"
		integrity="{{.JsSRI}}"
		crossorigin="anonymous"
	></script>

    <script nonce="{{.Nonce}}">
{{.CostPanelJS}}
      class PrefixedStorage {
        constructor(prefix = '') {
          this.prefix = prefix;
        }

        _addPrefix(key) {
          return this.prefix + key;
        }

        _removePrefix(prefixedKey) {
          return prefixedKey.substring(this.prefix.length);
        }

        setItem(key, value) {
          const prefixedKey = this._addPrefix(key);
          localStorage.setItem(prefixedKey, value);
        }

        getItem(key) {
          const prefixedKey = this._addPrefix(key);
          return localStorage.getItem(prefixedKey);
        }

        removeItem(key) {
          const prefixedKey = this._addPrefix(key);
          localStorage.removeItem(prefixedKey);
        }

        clear() {
          const keysToRemove = [];
          for (let i = 0; i < localStorage.length; i++) {
            const key = localStorage.key(i);
            if (key.startsWith(this.prefix)) {
              keysToRemove.push(key);
            }
          }
          keysToRemove.forEach(key => localStorage.removeItem(key));
        }

        get length() {
          let count = 0;
          for (let i = 0; i < localStorage.length; i++) {
            const key = localStorage.key(i);
            if (key.startsWith(this.prefix)) {
              count++;
            }
          }
          return count;
        }

        key(index) {
          const keys = [];
          for (let i = 0; i < localStorage.length; i++) {
            const key = localStorage.key(i);
            if (key.startsWith(this.prefix)) {
              keys.push(this._removePrefix(key));
            }
          }
          return index >= 0 && index < keys.length ? keys[index] : null;
        }
      }
{{- if .EndpointIsAbsolute}}
      const url = {{.Endpoint}};
      const subscriptionUrl = {{.SubscriptionEndpoint}};
{{- else}}
      const url = location.protocol + '//' + location.host + {{.Endpoint}};
      const wsProto = location.protocol == 'https:' ? 'wss:' : 'ws:';
      const subscriptionUrl = wsProto + '//' + location.host + {{.Endpoint}};
{{- end}}
      const fetcherHeaders = undefined;
{{- if .Headers}}
      const uiHeaders = {{.Headers}};
{{- else}}
      const uiHeaders = undefined;
{{- end}}

      const costgate = costgateCostPanel(GraphiQL, React, url, fetcherHeaders);
      let plugins = [costgate.plugin];

      const fetcher = costgate.wrapFetcher(GraphiQL.createFetcher({ url, subscriptionUrl, headers: fetcherHeaders }));
      ReactDOM.render(
        React.createElement(GraphiQL, {
          fetcher: fetcher,
          isHeadersEditorEnabled: true,
          shouldPersistHeaders: true,
          headers: JSON.stringify(uiHeaders, null, 2),
{{- if .DefaultQuery}}
          defaultQuery: {{.DefaultQuery}},
{{- end}}
          plugins: plugins,
          storage: new PrefixedStorage('{{.StoragePrefix}}'),
          inputValueDeprecation: true
        }),
        document.getElementById('graphiql'),
      );
    </script>
  </body>
</html>
`))
