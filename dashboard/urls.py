from django.urls import path

from . import actions, comparison, views

app_name = "dashboard"
urlpatterns = [
    path("", views.batch_list, name="batches"),
    path("batches/<uuid:batch_id>/", views.batch_detail, name="batch_detail"),
    path("batches/<uuid:batch_id>/comparison", comparison.batch_comparison, name="batch_comparison"),
    path(
        "batches/<uuid:batch_id>/comparison.csv", comparison.batch_comparison_csv, name="batch_comparison_csv"
    ),
    path("batches/<uuid:batch_id>/retry-failed", actions.batch_retry_failed, name="batch_retry_failed"),
    path("batches/<uuid:batch_id>/cancel", actions.batch_cancel, name="batch_cancel"),
    path(
        "batches/<uuid:batch_id>/webhook/redeliver",
        actions.batch_webhook_redeliver,
        name="batch_webhook_redeliver",
    ),
    path("items/<int:item_id>/", views.item_detail, name="item_detail"),
    path("failures/", views.failures, name="failures"),
    path("providers/", views.providers, name="providers"),
    path("usage/", views.usage, name="usage"),
    path("usage.csv", views.usage_csv, name="usage_csv"),
]
