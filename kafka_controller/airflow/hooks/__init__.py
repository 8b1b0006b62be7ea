"""Hooks: one per connection type (``provider.get_provider_info`` declares both)."""
