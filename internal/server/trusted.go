package server

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/limiter/gqllimit"
)

// trustedCount is the number of trusted documents of one build of the
// handler: costgate_graphql_trusted_documents reads the one in effect, so
// that a reload that fails does not show the list it could not put in
// effect.
type trustedCount struct{ n atomic.Int64 }

// trustedDocuments is graphql.trusted_documents with the server's metrics
// hooked in, and the count of documents that this build will put in effect
// (s.nextTrusted; nil without trusted documents).
func (s *Server) trustedDocuments(cfg *config.Config) *gqllimit.TrustedDocuments {
	td := cfg.TrustedDocuments()
	if td == nil {
		s.nextTrusted = nil
		return nil
	}
	count := &trustedCount{}
	s.nextTrusted = count
	td.OnLoad = func(n int, err error) {
		count.n.Store(int64(n))
		if err != nil {
			s.metrics.trustedLoadErrors.Inc()
		}
	}
	td.OnRequest = s.metrics.trusted
	return td
}

// trustedGauge is costgate_graphql_trusted_documents, over the build in effect.
func (s *Server) trustedGauge() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "costgate_graphql_trusted_documents",
		Help: "Trusted documents in effect (graphql.trusted_documents); 0 without any.",
	}, func() float64 {
		if c := s.trusted.Load(); c != nil {
			return float64(c.n.Load())
		}
		return 0
	})
}
