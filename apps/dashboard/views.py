from django.http import HttpRequest, HttpResponse, JsonResponse


def overview(request: HttpRequest) -> HttpResponse:
    return HttpResponse("gpufinops")


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})
