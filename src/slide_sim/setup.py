from setuptools import find_packages, setup

package_name = 'slide_sim'

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
    ],
    install_requires=['setuptools'],
    zip_safe=False,
    maintainer='Slide Robotics',
    maintainer_email='engineering@slide-robotics.com',
    description='MuJoCo digital twin of the slide workcell.',
    license='Apache-2.0',
    entry_points={
        'console_scripts': [
            'twin_node = slide_sim.node:main',
        ],
    },
)
