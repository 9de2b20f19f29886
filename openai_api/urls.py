from django.urls import path

from . import views

app_name = "openai_api"
urlpatterns = [
    path("files", views.FilesView.as_view(), name="files"),
    path("files/<str:file_id>", views.FileDetailView.as_view(), name="file-detail"),
    path("files/<str:file_id>/content", views.FileContentView.as_view(), name="file-content"),
    path("batches", views.BatchesView.as_view(), name="batches"),
    path("batches/<str:batch_id>", views.BatchDetailView.as_view(), name="batch-detail"),
    path("batches/<str:batch_id>/cancel", views.BatchCancelView.as_view(), name="batch-cancel"),
]
