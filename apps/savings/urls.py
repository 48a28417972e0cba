from django.urls import path

from apps.savings import views

app_name = "savings"
urlpatterns = [
    path("savings/", views.savings_page, name="savings"),
]
