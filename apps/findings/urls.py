from django.urls import path

from apps.findings import views

app_name = "findings"
urlpatterns = [
    path("findings/", views.findings_page, name="findings"),
    path("findings/opt-out/<str:token>/", views.opt_out_view, name="opt-out"),
]
