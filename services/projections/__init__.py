"""The projections service: the floor's read models in key-value buckets."""
