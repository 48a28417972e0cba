from django.urls import path, re_path

from apps.reports.api import views

urlpatterns = [
    path("reports/", views.ReportListApi.as_view(), name="reports"),
    re_path(r"^reports/(?P<period>[^/]+)/csv/?$", views.ReportCsvApi.as_view(), name="report-csv"),
    re_path(r"^reports/(?P<period>[^/]+)/focus/?$", views.ReportFocusApi.as_view(), name="report-focus"),
    path("reports/<str:period>/", views.ReportDetailApi.as_view(), name="report-detail"),
    path("exports/focus/", views.FocusExportApi.as_view(), name="focus-export"),
    path("exports/focus/metadata/", views.FocusMetadataApi.as_view(), name="focus-metadata"),
]
