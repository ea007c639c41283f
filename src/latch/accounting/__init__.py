"""Accounting: what requests cost and what the provider will count.

* :mod:`latch.accounting.pricing`: dollars of provider usage and of views (genai-prices, cache writes and
  reads apart), timestamps, the price cache;
* :mod:`latch.accounting.forecast`: :class:`~latch.accounting.forecast.ProviderForecast`, the provider's
  token count of a request forecast from earlier ones (rate and intercept).
"""
