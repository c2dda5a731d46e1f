package graph

import (
	"fmt"
	"strings"
	"sync"

	"github.com/costgate/costgate/graph/model"
)

// Shop is the example API's data: deterministic, in memory. Product i has
// 1 + i%7 variants and i%4 reviews, so that a query asking for 5 of each
// usually gets fewer, and its actual cost is below the requested one.
type Shop struct {
	mu       sync.RWMutex
	products []*model.Product
	byID     map[string]*model.Product
	variants map[string][]*model.Variant
	reviews  map[string][]*model.Review
	users    []*model.User
	nextID   int
}

// ProductCount is the number of products in the example shop.
const ProductCount = 250

// NewShop returns the example shop.
func NewShop() *Shop {
	adjectives := []string{"Sturdy", "Quiet", "Bright", "Compact", "Vintage", "Nimble", "Cosy"}
	things := []string{"Lamp", "Kettle", "Backpack", "Chair", "Notebook", "Teapot", "Bicycle", "Clock", "Scarf", "Mug", "Tent"}
	colors := []string{"red", "green", "blue", "black", "white"}
	sizes := []string{"S", "M", "L", "XL"}
	words := []string{"great", "solid", "flimsy", "lovely", "sturdy", "noisy", "bright", "worth it"}
	s := &Shop{byID: map[string]*model.Product{}, variants: map[string][]*model.Variant{}, reviews: map[string][]*model.Review{}}
	for i := range 20 {
		s.users = append(s.users, &model.User{ID: fmt.Sprintf("u%d", i+1), Name: fmt.Sprintf("User %d", i+1)})
	}
	for i := 1; i <= ProductCount; i++ {
		p := &model.Product{
			ID:          fmt.Sprintf("p%d", i),
			Title:       adjectives[i%len(adjectives)] + " " + things[i%len(things)],
			PriceCents:  500 + (i*733)%9500,
			Description: fmt.Sprintf("A %s %s, item %d of the example shop.", strings.ToLower(adjectives[i%len(adjectives)]), strings.ToLower(things[i%len(things)]), i),
		}
		s.products = append(s.products, p)
		s.byID[p.ID] = p
		for v := range 1 + i%7 {
			s.variants[p.ID] = append(s.variants[p.ID], &model.Variant{
				ID: fmt.Sprintf("%s-v%d", p.ID, v+1), Sku: fmt.Sprintf("SKU-%04d-%d", i, v+1),
				Color: colors[(i+v)%len(colors)], Size: sizes[v%len(sizes)], PriceCents: p.PriceCents + 100*v,
			})
		}
		for r := range i % 4 {
			s.nextID++
			s.reviews[p.ID] = append(s.reviews[p.ID], &model.Review{
				ID: fmt.Sprintf("r%d", s.nextID), Rating: 1 + (i+r)%5,
				Body:    fmt.Sprintf("%s %s", strings.ToUpper(words[(i+r)%len(words)][:1])+words[(i+r)%len(words)][1:], strings.ToLower(things[i%len(things)])),
				Author:  s.users[(i+r)%len(s.users)],
				Product: p,
			})
		}
	}
	return s
}

// Page returns up to first products after the one with ID after ("" for
// the start), and whether more follow.
func (s *Shop) Page(first int, after string) ([]*model.Product, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	start := 0
	if p, ok := s.byID[after]; ok {
		for i, q := range s.products {
			if q == p {
				start = i + 1
				break
			}
		}
	}
	end := min(start+max(first, 0), len(s.products))
	return s.products[start:end], end < len(s.products)
}

// Product returns a product by ID, or nil.
func (s *Shop) Product(id string) *model.Product {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byID[id]
}

// Variants returns up to first variants of a product.
func (s *Shop) Variants(productID string, first int) []*model.Variant {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v := s.variants[productID]
	return v[:min(max(first, 0), len(v))]
}

// Reviews returns up to first reviews of a product.
func (s *Shop) Reviews(productID string, first int) []*model.Review {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r := s.reviews[productID]
	return r[:min(max(first, 0), len(r))]
}

// Search returns up to first products and reviews whose text contains text.
func (s *Shop) Search(text string, first int) []model.SearchResult {
	s.mu.RLock()
	defer s.mu.RUnlock()
	text = strings.ToLower(text)
	var out []model.SearchResult
	for _, p := range s.products {
		if len(out) >= first {
			return out
		}
		if strings.Contains(strings.ToLower(p.Title), text) {
			out = append(out, p)
		}
		for _, r := range s.reviews[p.ID] {
			if len(out) < first && strings.Contains(strings.ToLower(r.Body), text) {
				out = append(out, r)
			}
		}
	}
	return out
}

// AddReview stores a new review.
func (s *Shop) AddReview(productID string, rating int, body string) (*model.Review, error) {
	if rating < 1 || rating > 5 {
		return nil, fmt.Errorf("rating must be between 1 and 5, got %d", rating)
	}
	if strings.TrimSpace(body) == "" {
		return nil, fmt.Errorf("body must not be empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.byID[productID]
	if p == nil {
		return nil, fmt.Errorf("no product %q", productID)
	}
	s.nextID++
	r := &model.Review{ID: fmt.Sprintf("r%d", s.nextID), Rating: rating, Body: body, Author: s.users[0], Product: p}
	s.reviews[productID] = append(s.reviews[productID], r)
	return r, nil
}
