int units_count(void);
int apply_all(void);

int
apply_all(void)
{
	return units_count();
}
